"""The foundation: errors, secrets, money, FX arithmetic, serialization, the GPU, provider and
fabric facts, cron, SMTP and HTTP settings. It knows no source, table or setting."""
