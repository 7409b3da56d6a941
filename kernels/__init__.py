"""Array primitives written once for NumPy and CuPy.

Every function takes its arrays and the array module ``xp`` (``numpy`` or ``cupy``); nothing here
imports ``gpuanon``. ``reference.py`` holds plain, slow NumPy versions that tests compare against.
"""
