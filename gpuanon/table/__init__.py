"""The table model: column roles, dictionaries, the encoded table, exact values and the cell format.

:mod:`.schema` column roles and kinds and every input check; :mod:`.dictionaries` the table's
dictionaries as chunk / combine / finalize reductions; :mod:`.encoding` the encoded table;
:mod:`.exact` exact ordered values (integers beyond 2**53, dates and times); :mod:`.cells` the
published cell format.
"""
