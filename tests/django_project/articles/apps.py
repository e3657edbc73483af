"""The articles app: each article's body is fingerprinted when it is saved."""

from django.apps import AppConfig


class ArticlesConfig(AppConfig):  # type: ignore[misc]  # Django has no type hints
    name = "tests.django_project.articles"
    label = "articles"

    def ready(self) -> None:
        from dedup_store.django import fingerprint_on_save
        from tests.django_project.articles.models import Article

        fingerprint_on_save(Article, "body")
