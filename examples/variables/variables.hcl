variable "cuda" {
  type        = string
  default     = "12.4"
  description = "CUDA version: 12.4 or 12.6"
}

variable "venv_root" {
  type    = string
  default = "/opt"
}
