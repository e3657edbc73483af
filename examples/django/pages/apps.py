"""The pages app: each page's body is fingerprinted when it is saved."""

from django.apps import AppConfig


class PagesConfig(AppConfig):
    name = "pages"

    def ready(self) -> None:
        from dedup_store.django import fingerprint_on_save
        from pages.models import Page

        fingerprint_on_save(Page, "body", id_of=lambda page: page.slug)
