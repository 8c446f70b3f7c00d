"""``python -m gpuroute.cli ...`` runs the ``gpuroute`` command line."""
import sys

from .main import main

sys.exit(main())
