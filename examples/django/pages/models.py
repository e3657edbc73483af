"""A page of the CMS."""

from django.db import models


class Page(models.Model):
    slug = models.SlugField(unique=True)
    body = models.TextField()
