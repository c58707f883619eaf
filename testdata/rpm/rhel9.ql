# The files rpm -ql lists for the driver's packages of the rhel9 root, one
# "package<TAB>path" a line; the fake rpm prints the paths of the packages it
# is asked for. Each package's list is its %files section in NVIDIA's
# nvidia-driver.spec (github.com/NVIDIA/yum-packaging-nvidia-driver, commit
# faa765d2d96d174e7a90203c5af462910232af53) with %{_libdir} = /usr/lib64,
# %{_bindir} = /usr/bin, %{_mandir} = /usr/share/man and version 550.90.07;
# the GSP firmware directory /lib/firmware/nvidia/550.90.07 belongs to nvidia-driver
# there, and holds the two files 550's runfile ships (gsp_ga10x.bin,
# gsp_tu10x.bin). Only the packages a CDI specification draws on are listed.
nvidia-driver	/usr/bin/nvidia-bug-report.sh
nvidia-driver	/lib/firmware/nvidia/550.90.07
nvidia-driver	/lib/firmware/nvidia/550.90.07/gsp_ga10x.bin
nvidia-driver	/lib/firmware/nvidia/550.90.07/gsp_tu10x.bin
nvidia-driver-cuda	/usr/bin/nvidia-cuda-mps-control
nvidia-driver-cuda	/usr/bin/nvidia-cuda-mps-server
nvidia-driver-cuda	/usr/bin/nvidia-debugdump
nvidia-driver-cuda	/usr/bin/nvidia-powerd
nvidia-driver-cuda	/usr/bin/nvidia-smi
nvidia-driver-cuda	/usr/share/man/man1/nvidia-cuda-mps-control.1.gz
nvidia-driver-cuda	/usr/share/man/man1/nvidia-smi.1.gz
nvidia-driver-cuda-libs	/usr/lib64/libcuda.so
nvidia-driver-cuda-libs	/usr/lib64/libcuda.so.1
nvidia-driver-cuda-libs	/usr/lib64/libcuda.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvcuvid.so.1
nvidia-driver-cuda-libs	/usr/lib64/libnvcuvid.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-compiler.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-encode.so.1
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-encode.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-nvvm.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-opticalflow.so.1
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-opticalflow.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-opencl.so.1
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-opencl.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-ptxjitcompiler.so.1
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-ptxjitcompiler.so.550.90.07
nvidia-driver-cuda-libs	/usr/lib64/libnvidia-wayland-client.so.550.90.07
nvidia-driver-NVML	/usr/lib64/libnvidia-ml.so.1
nvidia-driver-NVML	/usr/lib64/libnvidia-ml.so.550.90.07
