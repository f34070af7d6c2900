"""Learned actuators (equinox networks trained through the simulator).

``trainer``: the generic training loop (:func:`~actuatorlab.learned.trainer.train`);
``joint``: learned and residual one-joint actuators in the one-joint replay.
Importing this package imports nothing heavy; import the submodules.
"""
