"""Driving a Run: the one effect interpreter (``core``, over the store operations and the
vocabulary of ``protocol``, with ``reports``, ``handed`` and ``settings``), its push-mode
shells (``shell`` over ``store_ops``, ``driver``, ``driver_async`` and the generated
``driver_sync``, with ``actions``), the pull-mode runtime (``runtime``, its drives ``runtime_drive``, the
``runtime_ports`` they call, its ``ports`` and ``events``), what the interpreter decides at quiet points (``pending``, ``inbox``,
``delegations``, ``children``), transient model errors (``model_errors``) and the leases
a driver keeps (``lease_keeper``).

Modules here may import ``runkernel.adapters.stores``, ``runkernel.specs``,
``runkernel.kernel`` and the base modules, never ``worker`` or the CLI
(``tests/proofs/test_layers.py``)."""
