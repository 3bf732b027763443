"""Tests of the economics engine (tracker/economics) and its commands."""
