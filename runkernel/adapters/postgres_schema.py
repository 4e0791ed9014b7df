"""Deprecated: moved to ``runkernel.adapters.stores.postgres_schema``; this alias goes in runkernel 0.3."""

from runkernel._deprecation import moved_module
from runkernel.adapters.stores.postgres_schema import (
    SCHEMA_NAME as SCHEMA_NAME,
    SCHEMA_VERSION as SCHEMA_VERSION,
    TABLES as TABLES,
    check_current as check_current,
    drop_store as drop_store,
    found_version as found_version,
    init_postgres as init_postgres,
    migrate_postgres as migrate_postgres,
    split_url as split_url,
    unavailable as unavailable,
)

moved_module(__name__, "runkernel.adapters.stores.postgres_schema")
