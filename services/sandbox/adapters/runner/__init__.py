"""Scripts that run INSIDE the sandbox (bind-mounted read-only or copied into a container)."""
