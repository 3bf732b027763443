"""The provider registry (data/providers.json): one place for names, aliases and the
per-provider economics facts, read by ingest, the catalog sources and the economics engine."""

from __future__ import annotations

from tracker.core.providers import display_name, provider_id, provider_table, registry
from tracker.economics.defaults import EconomicsSettings, catalog


def test_every_provider_has_a_display_name_and_a_fabric_slot():
    for pid, provider in provider_table().items():
        assert provider.display_name, pid
        assert "fabric" in registry()["providers"][pid]


def test_source_names_map_to_tracker_ids_through_the_aliases():
    from scrapers.gpuhunt import provider_id as gpuhunt_id
    from scrapers.skypilot import provider_id as skypilot_id

    assert gpuhunt_id("lambdalabs") == "lambda" == provider_id("lambdalabs")
    assert skypilot_id("vast") == "vastai" == provider_id("vast")
    assert skypilot_id("nebius") == "nebius"
    assert provider_id("some-new-cloud") == "some-new-cloud"  # kept, not refused


def test_display_names_for_known_and_new_providers():
    assert display_name("gcp") == "Google Cloud"
    assert display_name("vastai") == "Vast.ai"
    assert display_name("my-neocloud") == "My Neocloud"


def test_economics_reads_provider_facts_from_the_registry_with_their_sources():
    data = catalog()
    assert data["billing"]["aws"]["minimum_seconds"] == 60
    assert data["spot"]["notice_seconds"]["aws"]["value"] == 120
    assert set(data["spot"]["default_mtti_hours"]) >= {"default", "aws", "gcp", "azure"}
    settings = EconomicsSettings()
    rule, source = settings.billing("gcp")
    assert (rule.granularity_seconds, rule.minimum_seconds) == (1, 60)
    assert "cloud.google.com" in source
    assert settings.billing("unknown-cloud")[0].minimum_seconds == 0  # the default entry
    assert settings.notice_seconds("azure") == 30
    assert settings.default_mtti_hours("aws")[0] == 24.0
