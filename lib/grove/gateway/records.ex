defmodule Grove.Gateway.Records do
  @moduledoc false
  # Yaws's records, read from Debian's headers, for the appmods and the
  # WebSocket callback.
  require Record

  @hrl "/usr/lib/yaws/include/yaws_api.hrl"

  Record.defrecord(:arg, Record.extract(:arg, from: @hrl))
  Record.defrecord(:http_request, Record.extract(:http_request, from: @hrl))
  Record.defrecord(:headers, Record.extract(:headers, from: @hrl))
  Record.defrecord(:ws_state, Record.extract(:ws_state, from: @hrl))
end
