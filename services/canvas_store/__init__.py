"""canvas_store: canvases, revisions, templates, sessions, tenancy and durable run state on SQL."""
