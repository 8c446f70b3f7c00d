"""Shared test setup: ``tests/`` on sys.path so every test module can ``from naive import ...`` (the
oracles), and the location of the shared real data (``../shared/data`` beside the checkout, as on CI)."""
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: The shared real data, beside the checkout (CI puts ``../shared`` there).
SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
