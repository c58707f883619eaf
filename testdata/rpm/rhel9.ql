# The files rpm -ql lists for the driver's packages of the rhel9 root, one
# "package<TAB>path" a line, as NVIDIA's RHEL 9 packages of 550.90.07 ship
# them; the fake rpm prints the paths of the packages it is asked for.
nvidia-driver-NVML	/usr/lib64/libnvidia-ml.so.1
nvidia-driver-NVML	/usr/lib64/libnvidia-ml.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libcuda.so
nvidia-driver-cuda-libs	/usr/lib64/libcuda.so.1
nvidia-driver-cuda-libs	/usr/lib64/libcuda.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-ptxjitcompiler.so.1
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-ptxjitcompiler.so.550.90.07
nvidia-driver-cuda	/usr/bin/nvidia-cuda-mps-control
nvidia-driver-cuda	/usr/bin/nvidia-cuda-mps-server
nvidia-driver-cuda	/usr/bin/nvidia-debugdump
nvidia-driver-cuda	/usr/bin/nvidia-smi
nvidia-driver-cuda	/usr/share/man/man1/nvidia-smi.1.gz
nvidia-kmod-common	/usr/lib/firmware/nvidia/550.90.07/gsp_ga10x.bin
nvidia-kmod-common	/usr/lib/firmware/nvidia/550.90.07/gsp_tu10x.bin
nvidia-persistenced	/usr/bin/nvidia-persistenced
