# The service config check-profiles reads in tests: every setting from the command line.
