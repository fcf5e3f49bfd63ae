"""Pure safety policies, no I/O beyond name resolution: which hook SQL may run, which webhook URLs
may be called. Below `spec` so the manifest models can refuse unsafe hooks at parse time; the
hooks runtime (`hakiri.hooks`) checks again just before acting."""
