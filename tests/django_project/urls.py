from django.urls import path

from tests.django_project.articles import views

urlpatterns = [
    path("publish", views.publish),
    path("publish-async", views.publish_async),
    path("articles/<slug:slug>", views.article),
    path("articles/<slug:slug>/duplicates", views.duplicates_async),
]
