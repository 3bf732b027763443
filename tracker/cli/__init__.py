"""The command line: the click group, the commands and the scheduler. Thin: it parses, calls one
application function and prints."""
