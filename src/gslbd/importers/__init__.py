"""Importers: other GSLB declarations (k8gb Gslb objects, octoDNS dynamic records) turned into lines of a
gslbd services file (JSON Lines, config/service_file.py) plus a report of what could not be mapped.

Pure: they read the text they are given and open no sockets (names and addresses are checked by
config/names.py, the rules gslbd loads them by); the CLI (cli/importer.py) reads the files, prints and
exits.
"""
