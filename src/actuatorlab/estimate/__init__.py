"""Model-based and learned estimation from joint logs, causal, one frame at a time: end-effector
force (:mod:`.force`), joint condition (:mod:`.monitor`)."""
