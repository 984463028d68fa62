"""What the edit forms of records with secrets share: a secret is set only when one is given."""

from __future__ import annotations


class SecretsFormMixin:
    """Assigns non-blank secrets through the model's encrypting properties; blank keeps what is stored."""

    secret_fields: tuple[str, ...] = ()

    def _post_clean(self) -> None:
        for name in self.secret_fields:
            if value := self.cleaned_data.get(name):  # type: ignore[attr-defined]
                setattr(self.instance, name, value)  # type: ignore[attr-defined]
        super()._post_clean()  # type: ignore[misc]


__all__ = ["SecretsFormMixin"]
