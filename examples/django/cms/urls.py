from django.urls import path
from pages import views

urlpatterns = [
    path("publish", views.publish),
    path("check", views.check),
    path("check-async", views.check_async),
    path("pages/<slug:slug>", views.page),
]
