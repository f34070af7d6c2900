"""Model-based and learned estimation from joint logs (end-effector force: :mod:`.force`)."""
