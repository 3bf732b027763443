"""The configuration: the typed schema, its value checks, the file's path and its TOML form."""
