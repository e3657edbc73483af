#!/usr/bin/env python
"""The example CMS's ``manage.py``: ``python manage.py migrate`` creates its tables and the
store's schema."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cms.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
