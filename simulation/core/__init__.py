"""The recording core: imports only torch and numpy (and the torch-free trace module); the watch API lives here."""
