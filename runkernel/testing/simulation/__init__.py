"""The crash simulator behind ``runkernel simulate``: scripted scenarios (``scenarios``)
played on a store by the engine (``engine``), which crashes the runtime where its plan
says and recovers it with fresh runtimes; each run is then judged from what the store
and the world say (``invariants``, ``contents``, ``history``); ``simulate`` plays many
runs and reports. Only the CLI's ``simulate`` command imports it, lazily."""
