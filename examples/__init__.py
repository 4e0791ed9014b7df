"""Example host applications for ``runkernel worker --app``."""
