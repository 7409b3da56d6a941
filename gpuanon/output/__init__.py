"""Writing what a run publishes: tables and reports written atomically, fast CSV, strict JSON.

:mod:`.io` atomic writes of tables and reports; :mod:`.csv_out` CSV through Arrow;
:mod:`.jsonsafe` values as strict JSON accepts them.
"""
