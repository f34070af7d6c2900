"""excite: excitation design for a one-joint bench or a whole robot, in data-flow order:
:mod:`.candidates` (safe commands) -> :mod:`.backends` (how to simulate them: the one-joint scan or
native MuJoCo) -> :mod:`.design` (Fisher information, greedy D-optimal set, command files)."""
