import Config

# The lab runs Grove with Grove's own configuration: the product's defaults,
# and in the lab's tests the product's test settings (no default instance).
# The lab's tasks start no world of their own unless they say so.
import_config "../../config/config.exs"
