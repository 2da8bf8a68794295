"""sandbox: runs untrusted Python and JavaScript in isolation and streams the output."""
