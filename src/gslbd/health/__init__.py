"""Health checking: the pure verdict machine (fsm), one probe module per check type (probes), and the
scheduler that runs every endpoint's probe on its own interval."""
