"""The package under test: build/python (CTest's python-package sets PYTHONPATH to it), else an
installed kvq (pip install .). kvq_dump.py (proptests/ports) provides an independent numpy port."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proptests", "ports"))
