"""beamcrawl: a polite, web-scale crawler written as a batch Apache Beam pipeline."""

__version__ = "0.1.0"
PRODUCT_TOKEN = "beamcrawl"
CONTACT_URL = "https://github.com/beamcrawl/beamcrawl"
DEFAULT_USER_AGENT = f"Mozilla/5.0 (compatible; {PRODUCT_TOKEN}/{__version__}; +{CONTACT_URL})"
