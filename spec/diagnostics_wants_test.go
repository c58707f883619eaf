package spec

// diagWants holds the exact diagnostics each case in diagCases must produce:
// severity, summary, detail and subject range.
var diagWants = map[string][]diag{
	"container toolkit management without cdi": {
		{"error", "Management spec without the CDI spec", "cdi_management = true writes the CDI management spec beside the CDI spec, and cdi = false (at spec.hcl:2,20-25), so gpuenv writes neither. Set cdi = true, or remove cdi_management.", "spec.hcl:3,20-24"},
	},
	"container toolkit management without any cdi": {
		{"error", "Management spec without the CDI spec", "cdi_management = true writes the CDI management spec beside the CDI spec, and cdi is not set and engines lists no \"podman\", so gpuenv writes neither. Set cdi = true, or remove cdi_management.", "spec.hcl:3,20-24"},
	},
	"container toolkit podman without cdi": {
		{"error", "Podman needs the CDI spec", "engines lists \"podman\" (at spec.hcl:2,24-32), which finds GPUs only through a CDI spec and has no runtime entry to configure; with cdi = false no container it starts can use a GPU. Set cdi = true, or remove \"podman\" from engines.", "spec.hcl:3,13-18"},
	},
	"container toolkit unknown engine": {
		{"error", "Invalid engine", "gpuenv configures the engines \"docker\", \"containerd\", \"crio\" and \"podman\"; \"dokcer\" is not one of them. Did you mean \"docker\"?", "spec.hcl:2,14-22"},
		{"error", "Invalid engine", "gpuenv configures the engines \"docker\", \"containerd\", \"crio\" and \"podman\"; \"lxc\" is not one of them.", "spec.hcl:2,24-29"},
	},
	"container toolkit duplicate engine": {
		{"error", "Duplicate engine", "The engine \"containerd\" is listed twice in engines; the first is at spec.hcl:2,14-26.", "spec.hcl:2,36-48"},
	},
	"container toolkit unsatisfiable version": {
		{"error", "Unsatisfiable version constraint", "No version can satisfy \"1.17.*, 1.16.*\": its bounds exclude each other. Check the comparison operators and the numbers.", "spec.hcl:2,13-29"},
	},
	"container toolkit default runtime without engine": {
		{"error", "No engine for the default runtime", "default_runtime = true makes the NVIDIA runtime the default of the engines that have runtime entries (\"docker\", \"containerd\" and \"crio\"), and engines lists none of them. Add the engine, or remove default_runtime.", "spec.hcl:3,21-25"},
	},
	"container toolkit absent with engines": {
		{"error", "Attribute not allowed with absent = true", "This container_toolkit block has absent = true, which removes the NVIDIA container toolkit, so \"engines\" has no meaning here. Remove \"engines\", or remove absent = true to manage the NVIDIA container toolkit.", "spec.hcl:3,3-10"},
	},
	"duplicate container toolkit": {
		{"error", "Duplicate container_toolkit block", "A spec may contain only one container_toolkit block; the first one is at spec.hcl:1,1-18.", "spec.hcl:3,1-18"},
	},
	"syntax error": {
		{"error", "Invalid expression", "Expected the start of an expression, but found an invalid expression token.", "spec.hcl:2,13-3,1"},
	},
	"syntax error unclosed block": {
		{"error", "Unclosed configuration block", "There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.", "spec.hcl:1,8-9"},
	},
	"unknown block": {
		{"error", "Unsupported block type", "Blocks of type \"drivr\" are not expected here. Did you mean \"driver\"?", "spec.hcl:1,1-6"},
	},
	"unknown attribute": {
		{"error", "Unsupported argument", "An argument named \"versoin\" is not expected here. Did you mean \"version\"?", "spec.hcl:2,3-10"},
	},
	"unknown attribute without suggestion": {
		{"error", "Unsupported argument", "An argument named \"colour\" is not expected here.", "spec.hcl:2,3-9"},
	},
	"block instead of attribute": {
		{"error", "Unsupported block type", "Blocks of type \"variables\" are not expected here. Did you mean to define argument \"variables\"? If so, use the equals sign to assign it a value.", "spec.hcl:2,3-12"},
	},
	"top-level attribute": {
		{"error", "Unsupported argument", "An argument named \"version\" is not expected here.", "spec.hcl:1,1-8"},
	},
	"wrong type bool": {
		{"error", "Incorrect attribute value type", "Inappropriate value for attribute \"hold\": a bool is required.", "spec.hcl:2,10-15"},
	},
	"wrong type list": {
		{"error", "Incorrect attribute value type", "Inappropriate value for attribute \"members\": list of string required, but have string.", "spec.hcl:2,13-20"},
	},
	"wrong type map": {
		{"error", "Incorrect attribute value type", "Inappropriate value for attribute \"variables\": map of string required.", "spec.hcl:2,15-22"},
	},
	"null list element": {
		{"error", "Incorrect attribute value type", "Inappropriate value for attribute \"members\": element 1 is null.", "spec.hcl:2,13-28"},
	},
	"unquoted version": {
		{"error", "Incorrect attribute value type", "Inappropriate value for attribute \"version\": a string is required. Write versions in quotes, such as \"12.10\": HCL reads an unquoted version as a number, and the number 12.10 is 12.1.", "spec.hcl:2,13-18"},
	},
	"duplicate driver": {
		{"error", "Duplicate driver block", "A spec may contain only one driver block; the first one is at spec.hcl:1,1-7.", "spec.hcl:4,1-7"},
	},
	"duplicate cuda across files": {
		{"error", "Duplicate cuda block", "A spec may contain only one cuda block; the first one is at a.hcl:1,1-5.", "b.hcl:1,1-5"},
	},
	"duplicate environment": {
		{"error", "Duplicate environment block", "A spec may contain only one environment block; the first one is at spec.hcl:1,1-12.", "spec.hcl:3,1-12"},
	},
	"duplicate framework": {
		{"error", "Duplicate framework block", "The framework \"pytorch\" for the virtual environment /opt/torch was already declared at spec.hcl:1,1-20. Each framework may appear once per Python environment.", "spec.hcl:5,1-20"},
	},
	"duplicate framework by interpreter": {
		{"error", "Duplicate framework block", "The framework \"jax\" for the interpreter /opt/jax/bin/python3.12 was already declared at spec.hcl:1,1-16. Each framework may appear once per Python environment.", "spec.hcl:4,1-16"},
	},
	"duplicate distro framework": {
		{"error", "Duplicate framework block", "The framework \"pytorch\" for the distribution's Python was already declared at spec.hcl:1,1-20. Each framework may appear once per Python environment.", "spec.hcl:4,1-20"},
	},
	"duplicate group": {
		{"error", "Duplicate group block", "A group named \"video\" was already declared at spec.hcl:1,1-14. Write all of a group's members in one group block.", "spec.hcl:4,1-14"},
	},
	"duplicate repository": {
		{"error", "Duplicate repository block", "A repository named \"cuda\" was already declared at spec.hcl:1,1-18. Repository names must be unique within a spec.", "spec.hcl:4,1-18"},
	},
	"duplicate device": {
		{"error", "Duplicate device block", "A device block for \"00\" (the same device as \"0\") was already declared at spec.hcl:1,1-11. Write all settings for a device in one block.", "spec.hcl:4,1-12"},
	},
	"mig bad profile names": {
		{"error", "Invalid MIG profile", "\"3g40gb\" is not a MIG GPU instance profile: write it as nvidia-smi mig -lgip lists them, compute slices and memory, such as \"1g.10gb\" or \"3g.40gb\".", "spec.hcl:2,27-35"},
		{"error", "Invalid MIG profile", "\"1g.5gb+mem\" is not a MIG GPU instance profile: write it as nvidia-smi mig -lgip lists them, compute slices and memory, such as \"1g.10gb\" or \"3g.40gb\".", "spec.hcl:2,37-49"},
	},
	"mig instances with mode disabled": {
		{"error", "MIG instances without MIG mode", "mode = \"disabled\" leaves no room for GPU instances: remove instances, or set mode = \"enabled\".", "spec.hcl:3,15-26"},
	},
	"mig bad mode and selector": {
		{"error", "Invalid mode value", "The allowed values for mode are \"enabled\" and \"disabled\"; \"on\" is not one of them.", "spec.hcl:2,10-14"},
		{"error", "Invalid device selector", "\"gpu0\" is not a device selector: write \"all\", a device index such as \"0\", or a GPU UUID such as \"GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\", as nvidia-smi -L lists them.", "spec.hcl:1,5-11"},
	},
	"mig compute instances": {
		{"error", "Compute instances of no GPU instance", "compute_instances divides the GPU instances of profile \"2g.20gb\", which instances does not list.", "spec.hcl:3,23-71"},
		{"error", "Compute instances over their GPU instance", "The compute instances of \"3g.40gb\" take 4 compute slices, and the GPU instance has 3.", "spec.hcl:3,23-71"},
	},
	"duplicate mig": {
		{"error", "Duplicate mig block", "A mig block for \"01\" was already declared at spec.hcl:1,1-8. Write a GPU's whole layout in one block.", "spec.hcl:4,1-9"},
	},
	"duplicate device uuid case": {
		{"error", "Duplicate device block", "A device block for \"GPU-5D5A1EE2-2F2A-4B33-9AC3-5B3E8F1B2C4D\" (the same device as \"GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\") was already declared at spec.hcl:1,1-50. Write all settings for a device in one block.", "spec.hcl:3,1-50"},
	},
	"duplicate variable": {
		{"error", "Duplicate variable declaration", "A variable named \"cuda\" was already declared at spec.hcl:1,1-16. Variable names must be unique within a spec.", "spec.hcl:4,1-16"},
	},
	"duplicate local": {
		{"error", "Duplicate local value definition", "A local value named \"a\" was already defined at spec.hcl:2,3-8. Local value names must be unique within a spec.", "spec.hcl:5,3-4"},
	},
	"unknown framework": {
		{"error", "Unknown framework", "gpuenv manages the frameworks \"pytorch\", \"tensorflow\" and \"jax\"; \"torch\" is not one of them. Did you mean \"pytorch\"?", "spec.hcl:1,11-18"},
	},
	"unknown framework no suggestion": {
		{"error", "Unknown framework", "gpuenv manages the frameworks \"pytorch\", \"tensorflow\" and \"jax\"; \"mxnet\" is not one of them.", "spec.hcl:1,11-18"},
	},
	"framework without label": {
		{"error", "Missing name for framework", "All framework blocks must have 1 labels (name).", "spec.hcl:1,11-12"},
	},
	"invalid constraint": {
		{"error", "Invalid version constraint", "\">= banana\" is not a valid version or version constraint: version \"banana\": must start with a digit. Write an exact version such as \"535.261.03\", a wildcard such as \"550.*\", or operators such as \">= 535, < 560\" or \"~12.4\".", "spec.hcl:2,13-24"},
	},
	"invalid version": {
		{"error", "Invalid version", "\"cu124\" is not a valid version: must start with a digit.", "spec.hcl:3,10-17"},
	},
	"framework cuda without minor": {
		{"error", "Invalid CUDA version", "The cuda attribute names the CUDA release the framework build targets as major.minor, such as \"12.4\" for PyTorch's cu124 wheels; \"12\" is not of that form.", "spec.hcl:3,10-14"},
	},
	"unsatisfiable constraint": {
		{"error", "Unsatisfiable version constraint", "No version can satisfy \">= 560, < 550\": its bounds exclude each other. Check the comparison operators and the numbers.", "spec.hcl:2,13-28"},
	},
	"unsatisfiable wildcards": {
		{"error", "Unsatisfiable version constraint", "No version can satisfy \"8.*, 9.*\": its bounds exclude each other. Check the comparison operators and the numbers.", "spec.hcl:2,13-23"},
	},
	"empty version": {
		{"error", "Invalid version", "A version must not be empty.", "spec.hcl:2,13-15"},
	},
	"version as option": {
		{"error", "Invalid version", "The version \"-12.4\" starts with \"-\".", "spec.hcl:2,13-20"},
	},
	"invalid group name": {
		{"error", "Invalid group name", "The group name \"Video\" is not valid: group names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $.", "spec.hcl:1,7-14"},
	},
	"group name too long": {
		{"error", "Invalid group name", "The group name \"abcdefghijklmnopqrstuvwxyz0123456\" is 33 characters long; the limit is 32.", "spec.hcl:1,7-42"},
	},
	"invalid user names": {
		{"error", "Invalid user name", "The user name \"-rf\" is not valid: user names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $.", "spec.hcl:2,23-28"},
		{"error", "Invalid user name", "The user name \"bob smith\" is not valid: user names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $.", "spec.hcl:2,30-41"},
		{"error", "Invalid user name", "The user name \"9lives\" is not valid: user names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $.", "spec.hcl:2,43-51"},
	},
	"duplicate member": {
		{"error", "Duplicate group member", "The user \"alice\" is listed twice in members; the first is at spec.hcl:2,14-21.", "spec.hcl:2,30-37"},
	},
	"invalid visible device": {
		{"error", "Invalid device identifier", "\"GPU-xyz\" is not a device index (such as \"0\"), a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or a MIG device (MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci> before driver R470), as nvidia-smi -L lists them.", "spec.hcl:2,32-41"},
	},
	"duplicate visible device": {
		{"error", "Duplicate device identifier", "\"00\" names the same device as \"0\" at spec.hcl:2,27-30. List each device once.", "spec.hcl:2,76-80"},
	},
	"MIG uuid with instance suffix": {
		{"error", "Invalid device identifier", "\"MIG-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d/1/0\" is not a device index (such as \"0\"), a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or a MIG device (MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci> before driver R470), as nvidia-smi -L lists them.", "spec.hcl:2,27-73"},
	},
	"relative cuda path": {
		{"error", "Invalid path", "The path \"usr/local/cuda\" is relative. Paths in a spec are absolute paths inside the root (--root), such as \"/usr/local/cuda\".", "spec.hcl:2,10-26"},
	},
	"escaping venv path": {
		{"error", "Invalid path", "The path \"/opt/../../etc\" contains \"..\". Write the path without \"..\" so that it is plain where it points, such as \"/etc\".", "spec.hcl:2,10-26"},
	},
	"path with whitespace": {
		{"error", "Invalid path", "The path \"/opt/my venv/bin/python\" contains characters that are not allowed: a path may use letters, digits and . _ + @ , = - /, since it is written into PATH, ld.so.conf and shell profile files.", "spec.hcl:2,12-37"},
	},
	"key id as fingerprint": {
		{"error", "Invalid key fingerprint", "The key fingerprint \"6F695994\" is a key ID, which other keys can share. A fingerprint is 40 hexadecimal digits for an OpenPGP version 4 key, as gpg --fingerprint prints it (spaces allowed), or 64 for versions 5 and 6.", "spec.hcl:4,21-31"},
	},
	"fingerprint not hex": {
		{"error", "Invalid key fingerprint", "The key fingerprint \"7D5AB3C8EA6E6296C742F6104948E0156F69599X\" is not a fingerprint. A fingerprint is 40 hexadecimal digits for an OpenPGP version 4 key, as gpg --fingerprint prints it (spaces allowed), or 64 for versions 5 and 6.", "spec.hcl:4,21-63"},
	},
	"fingerprint without keyring": {
		{"error", "Key fingerprint without a keyring file", "key_fingerprint names the key that the repository's keyring must hold, and gpuenv checks it in the keyring file on the host: set keyring to that file's absolute path, such as \"/usr/share/keyrings/cuda-archive-keyring.gpg\". A keyring URL is fetched by the package manager, where gpuenv cannot check it.", "spec.hcl:3,3-18"},
	},
	"fingerprint with keyring url": {
		{"error", "Key fingerprint without a keyring file", "key_fingerprint names the key that the repository's keyring must hold, and gpuenv checks it in the keyring file on the host: set keyring to that file's absolute path, such as \"/usr/share/keyrings/cuda-archive-keyring.gpg\". A keyring URL is fetched by the package manager, where gpuenv cannot check it.", "spec.hcl:4,3-18"},
	},
	"fingerprint with bad keyring": {
		{"error", "Invalid keyring", "The path \"keys/cuda.gpg\" is relative. Paths in a spec are absolute paths inside the root (--root), such as \"/keys/cuda.gpg\".", "spec.hcl:3,21-36"},
	},
	"fingerprint with absent": {
		{"error", "Attribute not allowed with absent = true", "This repository block has absent = true, which removes the repository, so \"key_fingerprint\" has no meaning here. Remove \"key_fingerprint\", or remove absent = true to manage the repository.", "spec.hcl:3,3-18"},
	},
	"relative keyring": {
		{"error", "Invalid keyring", "The path \"keys/cuda.gpg\" is relative. Paths in a spec are absolute paths inside the root (--root), such as \"/keys/cuda.gpg\".", "spec.hcl:3,13-28"},
	},
	"file url with host": {
		{"error", "Invalid URL", "The file URL \"file://mirror/srv/repo\" names the host \"mirror\". A file URL names an absolute path on this host, such as file:///srv/mirror.", "spec.hcl:2,9-33"},
	},
	"file url escaping": {
		{"error", "Invalid URL", "The file URL \"file:///srv/../etc\" does not name a usable path. The path \"/srv/../etc\" contains \"..\". Write the path without \"..\" so that it is plain where it points, such as \"/etc\".", "spec.hcl:2,9-29"},
	},
	"python and venv": {
		{"error", "Conflicting framework attributes", "A framework block names either python, the interpreter of an existing virtual environment, or venv, a directory where gpuenv creates one; not both.", "spec.hcl:3,3-7"},
	},
	"pip without environment": {
		{"error", "Missing Python environment", "A framework installed with pip needs a virtual environment: set python to an existing virtual environment's interpreter, or venv to a directory where gpuenv creates one. The system's Python refuses pip installs (PEP 668).", "spec.hcl:1,1-23"},
	},
	"distro with venv": {
		{"error", "Attribute not allowed with source = \"distro\"", "With source = \"distro\" the framework is the distribution's package (such as Debian's python3-torch), installed for the system's Python as the distribution built it, so \"venv\" has no meaning here. Use source = \"pip\" to install into a virtual environment.", "spec.hcl:3,3-7"},
	},
	"invalid kernel_modules": {
		{"error", "Invalid kernel_modules value", "The allowed values for kernel_modules are \"open\", \"proprietary\" and \"none\"; \"opne\" is not one of them. Did you mean \"open\"?", "spec.hcl:2,20-26"},
	},
	"invalid driver source": {
		{"error", "Invalid source value", "The allowed values for source are \"distro\" and \"nvidia\"; \"pip\" is not one of them.", "spec.hcl:2,12-17"},
	},
	"invalid framework source": {
		{"error", "Invalid source value", "The allowed values for source are \"pip\" and \"distro\"; \"nvidia\" is not one of them.", "spec.hcl:2,12-20"},
	},
	"invalid device order": {
		{"error", "Invalid cuda_device_order value", "The allowed values for cuda_device_order are \"PCI_BUS_ID\" and \"FASTEST_FIRST\"; \"pci_bus_id\" is not one of them.", "spec.hcl:2,23-35"},
	},
	"invalid compute mode": {
		{"error", "Invalid compute_mode value", "The allowed values for compute_mode are \"default\", \"exclusive_process\" and \"prohibited\"; \"exclusive\" is not one of them. Did you mean \"exclusive_process\"?", "spec.hcl:2,18-29"},
	},
	"invalid device selector": {
		{"error", "Invalid device selector", "\"first\" is not a device selector: write \"all\", a device index such as \"0\", or a GPU UUID such as \"GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\", as nvidia-smi -L lists them.", "spec.hcl:1,8-15"},
	},
	"MIG device selector": {
		{"error", "Invalid device selector", "\"MIG-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\" is not a device selector: write \"all\", a device index such as \"0\", or a GPU UUID such as \"GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\", as nvidia-smi -L lists them.", "spec.hcl:1,8-50"},
	},
	"undeclared variable": {
		{"error", "Reference to undeclared input variable", "An input variable with the name \"cuda_versoin\" has not been declared. This variable can be declared with a variable \"cuda_versoin\" {} block. Did you mean \"cuda_version\"?", "spec.hcl:5,13-29"},
	},
	"undeclared local": {
		{"error", "Reference to undeclared local value", "A local value with the name \"troch\" has not been declared. Did you mean \"torch\"?", "spec.hcl:6,13-24"},
	},
	"invalid reference": {
		{"error", "Invalid reference", "A reference to \"vars\" is not valid here: a spec refers to input variables as var.<name> and to local values as local.<name>. Did you mean \"var\"?", "spec.hcl:2,13-22"},
	},
	"variable wrong type from --var": {
		{"error", "Invalid value for variable", "The value given by --var count is not valid for the variable \"count\" declared at spec.hcl:1,1-17: a number is required.", ""},
	},
	"variable wrong type from var file": {
		{"error", "Invalid value for variable", "The value given by the var file vars.hclvars is not valid for the variable \"devices\" declared at spec.hcl:1,1-19: list of string required, but have string.", "vars.hclvars:1,11-16"},
	},
	"variable wrong type from environment": {
		{"error", "Invalid value for variable", "The value given by the environment variable GPUENV_VAR_persist is not valid for the variable \"persist\" declared at spec.hcl:1,1-19: a bool is required.", ""},
	},
	"variable default wrong type": {
		{"error", "Invalid default value for variable", "This default value is not compatible with the variable's type constraint: a bool is required.", "spec.hcl:3,13-20"},
	},
	"variable value not an expression": {
		{"error", "Invalid value for variable", "The value given by --var devices is not valid for the variable \"devices\" declared at spec.hcl:1,1-19: Expected the start of an expression, but found the end of the file.", ""},
	},
	"missing required variable": {
		{"error", "No value for required variable", "The variable \"cuda\" has no default, so it needs a value: pass --var cuda=VALUE, set it in a --var-file, or set the environment variable GPUENV_VAR_cuda.", "spec.hcl:1,1-16"},
	},
	"undeclared --var": {
		{"error", "Value for undeclared variable", "A variable named \"cdua\" was assigned with --var, but the spec does not declare it. Declare it with a variable \"cdua\" block, or remove the assignment. Did you mean \"cuda\"?", ""},
	},
	"undeclared var-file value": {
		{"warning", "Value for undeclared variable", "The spec does not declare a variable named \"torch\", so this value is ignored.", "vars.hclvars:2,1-6"},
	},
	"missing var file": {
		{"error", "Cannot read var file", "Reading nowhere.vars: no such file or directory.", ""},
	},
	"var file with a block": {
		{"error", "Unexpected \"cuda\" block", "Blocks are not allowed here.", "vars.hclvars:1,1-5"},
	},
	"var file referring to variables": {
		{"error", "Variables not allowed", "Variables may not be used here.", "vars.hclvars:1,8-11"},
	},
	"invalid variable name": {
		{"error", "Invalid variable name", "The name \"0cuda\" is not a valid variable name: a name starts with a letter and may contain letters, digits, underscores and hyphens.", "spec.hcl:1,10-17"},
	},
	"invalid variable type": {
		{"error", "Invalid type specification", "The keyword \"text\" is not a valid type specification.", "spec.hcl:2,10-14"},
	},
	"local cycle": {
		{"error", "Cycle in local values", "The local values refer to each other in a cycle: local.a → local.b → local.c → local.a. A local value cannot depend on itself.", "spec.hcl:2,7-14"},
	},
	"local self reference": {
		{"error", "Cycle in local values", "The local values refer to each other in a cycle: local.a → local.a. A local value cannot depend on itself.", "spec.hcl:2,7-20"},
	},
	"invalid repository scheme": {
		{"error", "Invalid URL", "The URL \"ftp://mirror.example.com/debian\" must start with https://, http:// or file://.", "spec.hcl:2,9-42"},
	},
	"repository url without host": {
		{"error", "Invalid URL", "The URL \"https:///debian\" has no host.", "spec.hcl:2,9-26"},
	},
	"repository url with credentials": {
		{"error", "Invalid URL", "The URL \"https://user:secret@mirror.example.com/debian\" contains credentials. Credentials do not belong in a spec: put them in /etc/apt/auth.conf.d or pip's configuration on the host.", "spec.hcl:2,9-56"},
	},
	"repository url with space": {
		{"error", "Invalid URL", "The URL \"https://mirror.example.com/deb ian\" contains whitespace or a control character.", "spec.hcl:2,9-45"},
	},
	"repository without url": {
		{"error", "Missing required argument", "The argument \"url\" is required, but no definition was found.", "spec.hcl:1,1-20"},
	},
	"invalid repository name": {
		{"error", "Invalid repository name", "The repository name \"../sources\" is not valid: it names a file under /etc/apt, so it starts with a letter or digit, is followed by letters, digits, underscores, hyphens or dots, and is at most 64 characters long.", "spec.hcl:1,12-24"},
	},
	"invalid suite and component": {
		{"error", "Invalid suite", "The suite \"-o APT::x\" is not valid: a suite is a distribution name such as \"bookworm\" or \"jammy-updates\", or, for a flat repository such as NVIDIA's CUDA repository, a directory ending in \"/\" such as \"/\".", "spec.hcl:3,29-40"},
		{"error", "Invalid component", "The component \"non free\" is not valid: a component is an archive area such as \"main\", \"contrib\" or \"non-free-firmware\".", "spec.hcl:4,25-35"},
	},
	"flat repository with components": {
		{"error", "Components in a flat repository", "The suite \"/\" names a flat repository, which has no components. Remove components, or name a distribution suite such as \"bookworm\".", "spec.hcl:3,17-23"},
	},
	"distribution suite without components": {
		{"error", "Missing components", "The suite \"bookworm\" is a distribution suite, which needs at least one component, such as \"main\".", "spec.hcl:3,12-24"},
	},
	"mixed suites": {
		{"error", "Mixed repository layouts", "The suite \"/\" names a flat repository and \"bookworm\" a distribution; one repository block describes one layout. Declare a second repository block for the other.", "spec.hcl:3,29-32"},
	},
	"empty suites": {
		{"error", "Missing suite", "A repository needs at least one suite: a distribution such as \"bookworm\", or \"/\" for a flat repository.", "spec.hcl:3,12-14"},
	},
	"fractional priority": {
		{"error", "Incorrect attribute value type", "Inappropriate value for attribute \"priority\": a whole number is required.", "spec.hcl:3,14-19"},
	},
	"priority out of range": {
		{"error", "Invalid priority value", "The priority must be between -32768 and 32767.", "spec.hcl:3,14-20"},
	},
	"invalid index_url": {
		{"error", "Invalid URL", "The URL \"download.pytorch.org/whl/cu124\" must start with https://, http:// or file://.", "spec.hcl:3,15-47"},
	},
	"invalid extra": {
		{"error", "Invalid extra", "The extra \"--pre\" is not a valid Python package extra name, such as \"and-cuda\" or \"cuda12\".", "spec.hcl:3,23-30"},
	},
	"absent with attributes": {
		{"error", "Attribute not allowed with absent = true", "This driver block has absent = true, which removes the NVIDIA driver, so \"version\" has no meaning here. Remove \"version\", or remove absent = true to manage the NVIDIA driver.", "spec.hcl:3,3-10"},
		{"error", "Attribute not allowed with absent = true", "This driver block has absent = true, which removes the NVIDIA driver, so \"hold\" has no meaning here. Remove \"hold\", or remove absent = true to manage the NVIDIA driver.", "spec.hcl:4,3-7"},
	},
	"absent group with members": {
		{"error", "Attribute not allowed with absent = true", "This group block has absent = true, which removes the group, so \"members\" has no meaning here. Remove \"members\", or remove absent = true to manage the group.", "spec.hcl:3,3-10"},
	},
	"invalid environment variable name": {
		{"error", "Invalid environment variable name", "The environment variable name \"1X\" is not valid: it starts with a letter or underscore, followed by letters, digits or underscores.", "spec.hcl:3,5-9"},
	},
	"environment variable value with newline": {
		{"error", "Invalid environment variable value", "The value of HF_HOME contains a control character such as a newline, which cannot be written into /etc/profile.d or a systemd setting.", "spec.hcl:3,15-34"},
	},
	"reserved environment variable": {
		{"error", "Reserved environment variable", "CUDA_VISIBLE_DEVICES is set with the cuda_visible_devices attribute of the environment block, which checks its value; set it there instead.", "spec.hcl:3,5-25"},
	},
	"LD_LIBRARY_PATH warning": {
		{"warning", "System-wide LD_LIBRARY_PATH", "A system-wide LD_LIBRARY_PATH overrides the libraries that pip wheels bring with them, such as PyTorch's own cuDNN. gpuenv adds library directories to the dynamic linker's configuration instead: set cuda { set_environment = true } for the CUDA toolkit.", "spec.hcl:3,5-20"},
	},
	"function error": {
		{"error", "Too many function arguments", "Function \"upper\" expects only 1 argument(s).", "spec.hcl:2,22-23"},
	},
	"unknown function": {
		{"error", "Call to unknown function", "There is no function named \"file\". Did you mean \"title\"?", "spec.hcl:2,13-17"},
	},
	"format width limit": {
		{"error", "Invalid function argument", "Invalid value for \"format\" parameter: width or precision over 1000 in a format verb.", "spec.hcl:2,21-32"},
	},
	"missing spec": {
		{"error", "Cannot read spec", "Reading nowhere.hcl: no such file or directory.", ""},
	},
	"empty directory": {
		{"error", "No spec files", "The directory . contains no .hcl files. A spec is a .hcl file, or a directory of them that gpuenv reads together.", ""},
	},
	"several problems at once": {
		{"error", "Invalid version constraint", "\"55x\" is not a valid version or version constraint: version \"55x\": unexpected \"x\" after \"55\". Write an exact version such as \"535.261.03\", a wildcard such as \"550.*\", or operators such as \">= 535, < 560\" or \"~12.4\".", "spec.hcl:2,13-18"},
		{"error", "Incorrect attribute value type", "Inappropriate value for attribute \"hold\": bool required, but have number.", "spec.hcl:3,13-14"},
		{"error", "Invalid group name", "The group name \"Video\" is not valid: group names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $.", "spec.hcl:5,7-14"},
		{"error", "Invalid user name", "The user name \"Alice\" is not valid: user names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $.", "spec.hcl:6,14-21"},
	},
	"team invalid group": {
		{"error", "Invalid group name", "The group name \"Vision\" is not valid: group names start with a lowercase letter or an underscore, followed by lowercase letters, digits, underscores or hyphens, optionally ending in $. A team block is labelled with the Unix group whose members are the team.", "spec.hcl:1,6-14"},
	},
	"team invalid device": {
		{"error", "Invalid device identifier", "\"gpu5\" is not a device index (such as \"0\"), a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or a MIG device (MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci> before driver R470), as nvidia-smi -L lists them.", "spec.hcl:2,32-38"},
	},
	"team duplicate device": {
		{"error", "Duplicate device identifier", "\"04\" names the same device as \"4\" at spec.hcl:2,27-30. List each device once.", "spec.hcl:2,32-36"},
	},
	"duplicate team": {
		{"error", "Duplicate team block", "A team of the group \"vision\" was already declared at spec.hcl:1,1-14. A group's members get one CUDA_VISIBLE_DEVICES: write the team's devices in one team block.", "spec.hcl:4,1-14"},
	},
	"team without devices": {
		{"error", "Missing required argument", "The argument \"cuda_visible_devices\" is required: it is what the team's members get. To remove a team's file, write absent = true.", "spec.hcl:1,1-14"},
	},
	"team with no devices": {
		{"error", "No devices for the team", "An empty cuda_visible_devices hides every GPU from the team's members. Name the team's GPUs or MIG devices, or leave the members out of the group \"vision\".", "spec.hcl:2,26-28"},
	},
	"team absent with devices": {
		{"error", "Attribute not allowed with absent = true", "This team block has absent = true, which removes the team's file, so \"cuda_visible_devices\" has no meaning here. Remove \"cuda_visible_devices\", or remove absent = true to manage the team's file.", "spec.hcl:3,3-23"},
	},
	"device shared by teams": {
		{"warning", "Device shared by two teams", "\"MIG-5D5A1EE2-2F2A-4B33-9AC3-5B3E8F1B2C4D\" is also listed for the team \"vision\", at spec.hcl:2,32-74. CUDA_VISIBLE_DEVICES chooses which devices a program sees, not which it may use: both teams' programs would run on it and share its memory. List it for one team only, unless they mean to share it.", "spec.hcl:5,27-69"},
		{"warning", "Device shared by two teams", "\"4\" is also listed for the team \"vision\", at spec.hcl:2,27-30. CUDA_VISIBLE_DEVICES chooses which devices a program sees, not which it may use: both teams' programs would run on it and share its memory. List it for one team only, unless they mean to share it.", "spec.hcl:5,76-79"},
	},
	"team with a label too many": {
		{"error", "Extraneous label for team", "Only 1 labels (group) are expected for team blocks.", "spec.hcl:1,15-20"},
	},
}
