"""The PostgreSQL server: the connection, the embedded server, server settings, dump and restore."""
