# label: benign
import logging
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
log = logging.getLogger("etl")
for step in ("extract", "transform", "load"):
    log.info("running %s", step)
