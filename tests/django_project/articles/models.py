from django.db import models


class Article(models.Model):  # type: ignore[misc]  # Django has no type hints
    slug = models.SlugField(unique=True)
    body = models.TextField()
