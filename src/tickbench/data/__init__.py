"""What every dataset kind shares: the manifest, content hash, file naming, generation machinery,
the partition reader and the importers."""
