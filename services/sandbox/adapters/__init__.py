"""Technology adapters of the sandbox: cgroups, seccomp, bubblewrap, the Docker API, the pools."""
