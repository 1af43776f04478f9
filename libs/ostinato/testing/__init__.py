"""Test helpers shipped with the product: start the whole suite as real processes (`cluster`)."""
