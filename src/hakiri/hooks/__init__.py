"""Pre- and post-load hooks at run time: guarded admin SQL and webhooks."""
