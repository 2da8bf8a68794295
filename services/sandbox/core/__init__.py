"""Plain typed core of the sandbox: jobs, limits, events, the backend port and the supervisor."""
