# label: benign; set: heldout
import logging

level = "info"
logging.basicConfig(level=getattr(logging, level.upper()))
log = logging.getLogger("report")
log.info("started")
