"""What every service needs and nothing domain-specific: bootstrap, auth, settings, logging, errors."""
