defmodule Grove.Load.Fuzz do
  @moduledoc """
  A fuzzer for a running server's front doors: hostile inputs to the HTTP
  and WebSocket endpoints, each checked against what the server must
  answer, for the test suite and for a chaos lab.

      report = Grove.Load.Fuzz.run("127.0.0.1", 4000, count: 500, seed: 42)
      report.violations == []

  Each round draws one case (below) from a random stream seeded by
  `:seed`, so a run is repeated by its seed (the report says which one it
  used; only the token a server with accounts signs at the start differs).
  Every case sends its input on a connection of its own and judges the
  answer; then `GET /healthz` must still answer 200. The size cases
  assume the gateway's default limits (`Grove.Gateway`).

  ## What counts as an answer

    * A hostile HTTP request must be refused: a 4xx status (or 501 or 505,
      the statuses for a transfer coding or a version the server does not
      speak), then the connection closed.
    * A valid HTTP request, however odd, must be answered with any status
      below 500 (or 501, 505), then closed (the requests ask for it).
    * A mutated request (bytes flipped, inserted, deleted, repeated or cut
      in a valid one) may have become anything. The fuzzer ends its side
      after sending it; if it still holds a whole request (or one that is
      malformed before its end), as the HTTP parser the gateway uses reads
      it, any status below 500 (or 501, 505) is an answer; if it was left
      unfinished, a clean close without a word is one too.
    * A hostile WebSocket frame must get an `error` message or a close frame
      with a code; a hostile action after a join, an `acted` that is not
      `ok`, or an `error`. A mutated frame (or random bytes) that still holds a
      whole frame other than a pong, as cowlib reads it, must get any frame
      back or a close frame with a code; one left unfinished, that or a
      clean close after the fuzzer ends its side.

  Never an answer: a 5xx (but 501, 505), bytes that are not an HTTP
  response, a reset, or silence until the deadline.

  ## The cases

  `:http_version` (`HTTP/9.9` and the like), `:content_length_garbage`
  (`abc`, `-5`, a CR alone after the digits), `:content_length_huge`
  (twenty digits), `:chunk_size_huge` (twenty `F`s), `:chunk_framing`
  (sizes that are not hex, data longer than its size), `:transfer_coding`
  (codings other than chunked, and chunked that a vertical tab or a form
  feed follows),
  `:request_line_garbage`, `:header_line_garbage`, `:uri_huge` (up to
  120 KB), `:header_huge` (up to 80 KB), `:host_huge`, `:headers_many`,
  `:range_reversed` (`bytes=5-1` on a static file), `:chunked_body` (a
  valid body in random chunks), `:bad_avatar` (`"\\u0000"`, `""`,
  `<img ...>`), `:token_noncanonical` (another base64 spelling of a
  token, over HTTP) and `:ws_token_noncanonical` (in a join),
  `:ws_oversized`, `:ws_unmasked`, `:ws_garbage` (random bytes after the
  handshake), `:ws_join_reset` (a join, then a TCP reset),
  `:ws_act_hostile` (a join, then a game's action no game may take: an
  unknown or oversize name, an argument no action has, arguments of the
  wrong type, too many or nested, a target that is no direction; each
  must be answered `acted` with a refusal, or an `error`),
  `:ws_act_flood` (a join, then forty actions at once: answered, `acted`
  or an `error`, never silence), and the random mutations
  `:http_mutation` and `:ws_mutation` (which mutate actions too), drawn
  more often.

  ## Options

    * `:count` - rounds (default `100`)
    * `:seed` - the random stream's seed (default a random one)
    * `:deadline` - milliseconds the server has to answer an input
      (default `5000`); a connection has at least a second
    * `:cases` - the cases to draw from (default all)
    * `:max_violations` - violations kept in the report (default `100`)
    * `:only` - the rounds to send, to replay some of a run: the others
      are drawn from the stream as before but not sent (default all)
    * `:progress` - a function called with each round's number, case and
      outcome (default none)

  ## The report

  A map: `:seed`, `:rounds`, `:cases` (rounds per case), `:outcomes`
  (outcomes per case: a status, `"closed"`, `"close 1009"`, ...), and
  `:violations`, each `%{round:, case:, input:, got:, replay:}`, so that
  a caller can print them and exit non-zero. The input is shown whole up
  to 4 KB (its bytes as an Elixir string, those that are not printable
  escaped, a WebSocket frame's payload unmasked), with a token's whole
  value hidden (after `Bearer `, `"token":` or `v1.`, whatever its bytes)
  and any other run of base64 that may be one; `replay` is
  the options that send that round alone again (with the same `:cases`):
  the same bytes, but for a token the server signs anew.

      Grove.Load.Fuzz.run("127.0.0.1", 4000, Map.to_list(violation.replay))
  """

  import Bitwise

  alias Grove.WsClient
  alias Grove.Protocol

  @type violation :: %{
          round: pos_integer(),
          case: atom(),
          input: String.t(),
          got: String.t(),
          replay: %{seed: integer(), count: pos_integer(), only: [pos_integer()]}
        }
  @type report :: %{
          seed: integer(),
          rounds: non_neg_integer(),
          cases: %{atom() => non_neg_integer()},
          outcomes: %{atom() => %{String.t() => non_neg_integer()}},
          violations: [violation()]
        }

  # Cases and how often each is drawn against the others.
  @weights [
    http_version: 1,
    content_length_garbage: 1,
    content_length_huge: 1,
    chunk_size_huge: 1,
    chunk_framing: 1,
    transfer_coding: 1,
    request_line_garbage: 1,
    header_line_garbage: 1,
    uri_huge: 1,
    header_huge: 1,
    host_huge: 1,
    headers_many: 1,
    range_reversed: 1,
    chunked_body: 1,
    bad_avatar: 1,
    token_noncanonical: 1,
    ws_token_noncanonical: 1,
    ws_oversized: 1,
    ws_unmasked: 1,
    ws_garbage: 1,
    ws_join_reset: 1,
    ws_act_hostile: 3,
    ws_act_flood: 1,
    http_mutation: 8,
    ws_mutation: 6
  ]

  # The bytes of an input a violation shows: all but the largest inputs.
  @input_shown 4096

  # Actions no game may take, in either encoding: each is refused, by the
  # game's checks (`acted`) or the protocol's (`error`).
  @hostile_acts [
    :unknown_name,
    :huge_name,
    :unknown_arg,
    :mistyped_arg,
    :too_many_args,
    :nested_args,
    :bad_target
  ]

  @doc "Every case the fuzzer knows."
  @spec cases() :: [atom()]
  def cases, do: Keyword.keys(@weights)

  @doc "Runs the fuzzer against the server at `host`:`port`; see the module doc."
  @spec run(String.t(), :inet.port_number(), keyword()) :: report()
  def run(host, port, opts \\ []) do
    opts =
      Keyword.validate!(opts,
        count: 100,
        seed: :rand.uniform(1 <<< 32),
        deadline: 5000,
        cases: cases(),
        max_violations: 100,
        progress: nil,
        only: nil
      )

    unknown = opts[:cases] -- cases()
    if unknown != [], do: raise(ArgumentError, "unknown cases: #{inspect(unknown)}")

    # A replay that sends nothing would look like a run that found nothing.
    outside = Enum.reject(opts[:only] || [], &(&1 in 1..opts[:count]//1))

    if outside != [],
      do: raise(ArgumentError, "only rounds 1 to #{opts[:count]} run, not #{inspect(outside)}")

    weighted = for {name, weight} <- @weights, name in opts[:cases], _ <- 1..weight, do: name

    ctx = %{
      host: to_charlist(host),
      port: port,
      deadline: opts[:deadline],
      token: token(to_charlist(host), port, opts[:deadline], opts[:seed])
    }

    initial = %{
      seed: opts[:seed],
      rounds: 0,
      cases: %{},
      outcomes: %{},
      violations: []
    }

    rand = :rand.seed_s(:exsss, opts[:seed])

    {report, _rand} =
      Enum.reduce(1..opts[:count]//1, {initial, rand}, &round(&1, &2, weighted, ctx, opts))

    %{report | violations: Enum.reverse(report.violations)}
  end

  defp round(round, {report, rand}, weighted, ctx, opts) do
    {name, rand} = pick(weighted, rand)
    {probe, rand} = probe(name, rand, ctx)

    if opts[:only] == nil or round in opts[:only],
      do: {sent(round, name, probe, report, ctx, opts), rand},
      else: {report, rand}
  end

  defp sent(round, name, probe, report, ctx, opts) do
    outcome = exchange(probe, ctx)
    got = describe(outcome)
    if opts[:progress], do: opts[:progress].(round, name, got)
    max = opts[:max_violations]

    report
    |> Map.update!(:rounds, &(&1 + 1))
    |> update_in([:cases, Access.key(name, 0)], &(&1 + 1))
    |> update_in([:outcomes, Access.key(name, %{}), Access.key(got, 0)], &(&1 + 1))
    |> violation(judge(probe.expect, outcome), round, name, probe, max)
    |> violation(health(ctx), round, name, probe, max)
  end

  defp violation(report, :ok, _round, _name, _probe, _max), do: report

  defp violation(report, {:violation, got}, round, name, probe, max) do
    if length(report.violations) >= max do
      report
    else
      entry = %{
        round: round,
        case: name,
        input: shown(probe),
        got: got,
        replay: %{seed: report.seed, count: round, only: [round]}
      }

      %{report | violations: [entry | report.violations]}
    end
  end

  # The input as a report shows it: whole but for the largest, every byte
  # (`inspect/1` alone shows a binary that is not text as its first 50
  # bytes), a WebSocket frame's payload unmasked, and without the tokens
  # some inputs carry, whole or mutated: the whole value after `Bearer `
  # (to the end of its line) and after a join's `"token":` (to the end of
  # the frame), whatever its bytes, since a byte flipped or inserted in it
  # may be anything; the same after a token's `v1.`, where a mutation hit
  # what comes before it or where the binary encoding has no key; and any
  # other run of base64 long enough to hold 16 bytes. The seed gives the
  # input back.
  @doc false
  @spec shown(map()) :: String.t()
  def shown(%{kind: :ws, input: frames}) do
    frames |> Enum.map(&(&1 |> IO.iodata_to_binary() |> unmasked())) |> shown_bytes()
  end

  def shown(%{input: input}), do: shown_bytes(input)

  defp shown_bytes(input) do
    bytes = IO.iodata_to_binary(input)

    cut =
      if byte_size(bytes) > @input_shown,
        do: binary_part(bytes, 0, @input_shown),
        else: bytes

    shown =
      cut
      |> String.replace(~r/(Bearer |v1\.).*?(?=\r\n|\z)/s, "\\1<hidden>")
      |> String.replace(~r/([A-Za-z0-9_=-]{22,})/, "<hidden>")
      |> inspect(binaries: :as_strings, limit: :infinity, printable_limit: :infinity)

    if cut == bytes, do: shown, else: shown <> " ... (#{byte_size(bytes)} bytes)"
  end

  # A frame whose header reads as a masked one, with its payload (what of
  # it there is) unmasked and a join's token hidden in it; other bytes as
  # they are. The frames are shown one after another.
  defp unmasked(frame) do
    case :cow_ws.parse_header(frame, %{}, :undefined) do
      {_type, _fragment, _rsv, length, key, rest} when is_integer(key) ->
        head = binary_part(frame, 0, byte_size(frame) - byte_size(rest))
        {payload, after_payload} = :erlang.split_binary(rest, min(length, byte_size(rest)))
        head <> hide_token(unmask(payload, <<key::32>>)) <> after_payload

      _ ->
        frame
    end
  end

  defp unmask(payload, key) do
    mask = :binary.copy(key, div(byte_size(payload), 4) + 1)
    :crypto.exor(payload, binary_part(mask, 0, byte_size(payload)))
  end

  defp hide_token(payload) do
    case :binary.match(payload, [~s("token":), "v1."]) do
      {at, length} -> binary_part(payload, 0, at + length) <> "<hidden>"
      :nomatch -> payload
    end
  end

  ## Inputs

  # A probe: what to send (`:http` raw bytes, or `:ws` frames after a
  # handshake of our own), and what the answer must be.
  defp probe(:http_version, rand, _ctx) do
    {major, rand} = pick([0, 2, 3, 9, 10, 99], rand)
    {minor, rand} = :rand.uniform_s(10, rand)
    {refusal("GET /healthz HTTP/#{major}.#{minor - 1}\r\nHost: grove\r\n\r\n"), rand}
  end

  defp probe(:content_length_garbage, rand, _ctx) do
    {length, rand} =
      pick(["abc", "-5", "1 2", "0x10", "", "+5", "5.0", "5,5", "2\r", "2\v"], rand)

    {refusal(post("/api/device_login", "Content-Length: #{length}\r\n", "{}")), rand}
  end

  defp probe(:content_length_huge, rand, _ctx) do
    {digits, rand} = digits(20, rand)
    {refusal(post("/api/device_login", "Content-Length: #{digits}\r\n", "{}")), rand}
  end

  defp probe(:chunk_size_huge, rand, _ctx) do
    {size, rand} = pick([String.duplicate("F", 20), "7FFFFFFFFFFFFFFF", "100000000"], rand)
    {refusal(post("/api/device_login", "Transfer-Encoding: chunked\r\n", size <> "\r\n{}")), rand}
  end

  defp probe(:chunk_framing, rand, _ctx) do
    {body, rand} =
      pick(
        [
          "zz\r\n{}\r\n0\r\n\r\n",
          "-1\r\n{}\r\n0\r\n\r\n",
          "\r\n{}\r\n0\r\n\r\n",
          "2\r\n{}XX\r\n0\r\n\r\n",
          "0x2\r\n{}\r\n0\r\n\r\n"
        ],
        rand
      )

    {refusal(post("/api/device_login", "Transfer-Encoding: chunked\r\n", body)), rand}
  end

  defp probe(:transfer_coding, rand, _ctx) do
    {coding, rand} =
      pick(
        [
          "gzip",
          "chunked, gzip",
          "gzip, chunked",
          "identity",
          "chunkedx",
          "chunked\v",
          "chunked\f"
        ],
        rand
      )

    {refusal(post("/api/login", "Transfer-Encoding: #{coding}\r\n", "0\r\n\r\n")), rand}
  end

  defp probe(:request_line_garbage, rand, _ctx) do
    {line, rand} = garbage(1, 200, rand)
    {refusal([line, "\r\nHost: grove\r\n\r\n"]), rand}
  end

  defp probe(:header_line_garbage, rand, _ctx) do
    {line, rand} = garbage(1, 200, rand)

    {answer(["GET /healthz HTTP/1.1\r\nHost: grove\r\n", line, "\r\nConnection: close\r\n\r\n"]),
     rand}
  end

  defp probe(:uri_huge, rand, _ctx) do
    {size, rand} = :rand.uniform_s(110_000, rand)
    path = "/" <> String.duplicate("a", 10_000 + size)
    {refusal("GET #{path} HTTP/1.1\r\nHost: grove\r\n\r\n"), rand}
  end

  defp probe(:header_huge, rand, _ctx) do
    {size, rand} = :rand.uniform_s(50_000, rand)
    value = String.duplicate("a", 33_000 + size)
    {refusal("GET /healthz HTTP/1.1\r\nHost: grove\r\nX-Big: #{value}\r\n\r\n"), rand}
  end

  defp probe(:host_huge, rand, _ctx) do
    {size, rand} = :rand.uniform_s(30_000, rand)

    {refusal("GET /healthz HTTP/1.1\r\nHost: #{String.duplicate("h", 40_000 + size)}\r\n\r\n"),
     rand}
  end

  defp probe(:headers_many, rand, _ctx) do
    {count, rand} = :rand.uniform_s(60, rand)
    lines = for n <- 1..(40 + count), do: "X-Line-#{n}: #{String.duplicate("v", 1000)}\r\n"
    {refusal(["GET /healthz HTTP/1.1\r\nHost: grove\r\n", lines, "\r\n"]), rand}
  end

  defp probe(:range_reversed, rand, _ctx) do
    {first, rand} = :rand.uniform_s(1000, rand)
    {back, rand} = :rand.uniform_s(first, rand)
    range = "bytes=#{first}-#{first - back}"
    {answer(get("/index.html", "Range: #{range}\r\n")), rand}
  end

  defp probe(:chunked_body, rand, _ctx) do
    {device, rand} = word(16, rand)
    body = ~s({"device_id":"fuzz-#{device}"})
    {chunks, rand} = split(body, rand)

    encoded =
      for chunk <- chunks, do: [Integer.to_string(byte_size(chunk), 16), "\r\n", chunk, "\r\n"]

    {answer(post("/api/device_login", "Transfer-Encoding: chunked\r\n", [encoded, "0\r\n\r\n"])),
     rand}
  end

  defp probe(:bad_avatar, rand, _ctx) do
    {avatar, rand} =
      pick(["\u0000", "", "<img src=x onerror=alert(1)>", "😀😀", String.duplicate("x", 100)], rand)

    {name, rand} = word(10, rand)

    body =
      :jiffy.encode(%{"name" => "fz" <> name, "password" => "a long password", "avatar" => avatar})

    {refusal(post("/api/register", "Content-Type: application/json\r\n", body, true)), rand}
  end

  defp probe(:token_noncanonical, rand, ctx) do
    {token, rand} = noncanonical(ctx.token, rand)
    {refusal(get("/api/me", "Authorization: Bearer #{token}\r\n")), rand}
  end

  defp probe(:ws_token_noncanonical, rand, ctx) do
    {token, rand} = noncanonical(ctx.token, rand)
    {encoding, rand} = pick([:json, :binary], rand)
    join = %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: token}
    {ws(encoding, [masked(join, encoding)], :answer), rand}
  end

  defp probe(:ws_oversized, rand, _ctx) do
    {claimed, rand} = pick([1 <<< 20, 1 <<< 40, 70_000], rand)
    {encoding, rand} = pick([:json, :binary], rand)
    # The header of a masked text frame that claims `claimed` bytes, and a
    # little of them: the claim alone is over the limit.
    header = <<1::1, 0::3, 1::4, 1::1, 127::7, claimed::64, 0::32>>
    {ws(encoding, [[header, String.duplicate("x", 100)]], :refusal), rand}
  end

  defp probe(:ws_unmasked, rand, _ctx) do
    {encoding, rand} = pick([:json, :binary], rand)
    frame = :cow_ws.frame({:text, ~s({"type":"ping","t":1})}, %{})
    {ws(encoding, [frame], :refusal), rand}
  end

  defp probe(:ws_garbage, rand, _ctx) do
    {bytes, rand} = garbage(1, 2048, rand)
    {encoding, rand} = pick([:json, :binary], rand)
    {ws_unsure(encoding, bytes), rand}
  end

  defp probe(:ws_join_reset, rand, _ctx) do
    {encoding, rand} = pick([:json, :binary], rand)
    join = %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""}
    {ws(encoding, [masked(join, encoding)], :answer_then_reset), rand}
  end

  defp probe(:ws_act_hostile, rand, _ctx) do
    {encoding, rand} = pick([:json, :binary], rand)
    {how, rand} = pick(@hostile_acts, rand)
    {act, rand} = hostile_act(how, encoding, rand)

    {ws(encoding, [masked(guest_join(), encoding), masked_raw(act, encoding)], :act_refused),
     rand}
  end

  defp probe(:ws_act_flood, rand, _ctx) do
    {encoding, rand} = pick([:json, :binary], rand)
    {dir, rand} = pick([:here, :n, :e, :s, :w], rand)

    acts =
      for seq <- 1..40, do: masked(%{type: :act, seq: seq, action: "pick", dir: dir}, encoding)

    {ws(encoding, [masked(guest_join(), encoding) | acts], :act_answered), rand}
  end

  defp probe(:http_mutation, rand, ctx) do
    {template, rand} = pick(http_templates(ctx), rand)
    {mutated, rand} = mutate(template, rand)
    # Sent, then our side ended: a request left unfinished ends there.
    expect = if http_whole?(mutated), do: :answer, else: :unfinished
    {%{kind: :http, input: mutated, expect: expect, end_ours: true}, rand}
  end

  defp probe(:ws_mutation, rand, ctx) do
    {encoding, rand} = pick([:json, :binary], rand)
    {message, rand} = pick(ws_messages(ctx), rand)
    {mutated, rand} = mutate(IO.iodata_to_binary(masked(message, encoding)), rand)
    {ws_unsure(encoding, mutated), rand}
  end

  defp guest_join,
    do: %{type: :join, protocol: Protocol.version(), view_radius: 4, name: "", token: ""}

  # The frame's payload (it may break the protocol, so it is built here,
  # not by `Grove.Protocol.encode/2`).
  defp hostile_act(how, encoding, rand) do
    {word, rand} = word(8, rand)
    {seq, rand} = :rand.uniform_s(1_000_000, rand)

    act =
      case how do
        :unknown_name -> {"zz_" <> word, "here", %{}}
        :huge_name -> {String.duplicate(word, 500), "here", %{}}
        :unknown_arg -> {"pick", "here", %{("zz_" <> word) => 1}}
        :mistyped_arg -> {"pick", "n", %{("zz_" <> word) => word, "count" => "many"}}
        :too_many_args -> {"pick", "e", Map.new(1..17, &{"a#{&1}", &1})}
        :nested_args -> {"pick", "s", %{"a" => %{"b" => [1, 2.5, nil]}}}
        :bad_target -> {"pick", "up", %{}}
      end

    {act_payload(encoding, seq, act), rand}
  end

  defp act_payload(:json, seq, {action, dir, args}) do
    act = %{"type" => "act", "seq" => seq, "action" => action, "dir" => dir, "args" => args}
    IO.iodata_to_binary(:jiffy.encode(act))
  end

  defp act_payload(:binary, seq, {action, dir, args}) do
    target = Enum.find_index(~w(here n ne e se s sw w nw), &(&1 == dir)) || 200

    entries =
      for {name, value} <- args, into: <<>> do
        value =
          case value do
            n when is_integer(n) -> <<0, n::signed-32>>
            s when is_binary(s) -> <<1, byte_size(s)::16, s::binary>>
            # No binary form: a type byte the protocol does not have.
            _nested -> <<9, 0>>
          end

        <<byte_size(name)::16, name::binary, value::binary>>
      end

    <<7, seq::32, byte_size(action)::16, action::binary, target, map_size(args), entries::binary>>
  end

  defp masked_raw(payload, encoding) do
    kind = if encoding == :json, do: :text, else: :binary
    :cow_ws.masked_frame({kind, payload}, %{})
  end

  defp refusal(input), do: %{kind: :http, input: input, expect: :refusal, end_ours: false}
  defp answer(input), do: %{kind: :http, input: input, expect: :answer, end_ours: false}

  defp ws(encoding, frames, expect),
    do: %{kind: :ws, encoding: encoding, input: frames, expect: expect, end_ours: false}

  # Bytes that may or may not hold a whole frame the server must answer.
  # When they do not, our side is ended after them, and the server may
  # close without a word. (Not always: a client's end closes the server's
  # socket at once, before it could answer what came with it.)
  defp ws_unsure(encoding, bytes) do
    if ws_whole?(bytes, :undefined),
      do: ws(encoding, [bytes], :answer),
      else: %{ws(encoding, [bytes], :unfinished) | end_ours: true}
  end

  # Requests the fuzzer builds ask the server to close after its answer.
  defp get(path, headers),
    do: "GET #{path} HTTP/1.1\r\nHost: grove\r\n#{headers}Connection: close\r\n\r\n"

  defp post(path, headers, body, with_length \\ false) do
    length = if with_length, do: "Content-Length: #{IO.iodata_length(body)}\r\n", else: ""

    [
      "POST #{path} HTTP/1.1\r\nHost: grove\r\n",
      headers,
      length,
      "Connection: close\r\n\r\n",
      body
    ]
  end

  defp http_templates(ctx) do
    body = ~s({"device_id":"fuzz-mutation-device"})

    [
      "GET /healthz HTTP/1.1\r\nHost: grove\r\n\r\n",
      "GET /index.html HTTP/1.1\r\nHost: grove\r\nRange: bytes=0-9\r\n\r\n",
      "GET /terrain HTTP/1.1\r\nHost: grove\r\nAccept-Encoding: gzip\r\n\r\n",
      "GET /api/me HTTP/1.1\r\nHost: grove\r\nAuthorization: Bearer #{ctx.token}\r\n\r\n",
      "POST /api/device_login HTTP/1.1\r\nHost: grove\r\nContent-Type: application/json\r\n" <>
        "Content-Length: #{byte_size(body)}\r\n\r\n#{body}",
      "POST /api/device_login HTTP/1.1\r\nHost: grove\r\nTransfer-Encoding: chunked\r\n\r\n" <>
        "#{Integer.to_string(byte_size(body), 16)}\r\n#{body}\r\n0\r\n\r\n",
      "GET /ws?encoding=json HTTP/1.1\r\nHost: grove\r\nUpgrade: websocket\r\n" <>
        "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" <>
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    ]
  end

  defp ws_messages(ctx) do
    [
      %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""},
      %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ctx.token},
      %{type: :ping, t: 12_345},
      %{type: :move, seq: 1, dir: :n},
      %{type: :act, seq: 2, action: "pick", dir: :e, args: %{"count" => 2, "why" => "fuzz"}},
      %{type: :resync}
    ]
  end

  defp masked(message, encoding) do
    kind = if encoding == :json, do: :text, else: :binary
    :cow_ws.masked_frame({kind, IO.iodata_to_binary(Protocol.encode(message, encoding))}, %{})
  end

  # One to three of: a byte's bits flipped, bytes inserted, bytes deleted,
  # a slice repeated, the end cut off.
  defp mutate(input, rand) do
    {times, rand} = :rand.uniform_s(3, rand)

    Enum.reduce(1..times, {IO.iodata_to_binary(input), rand}, fn _, {bytes, rand} ->
      {operation, rand} = pick([:flip, :insert, :delete, :repeat, :cut], rand)
      mutate(operation, bytes, rand)
    end)
  end

  defp mutate(_operation, <<>>, rand), do: {<<>>, rand}

  defp mutate(:flip, bytes, rand) do
    {at, rand} = position(bytes, rand)
    {mask, rand} = :rand.uniform_s(255, rand)
    <<head::binary-size(at), byte, tail::binary>> = bytes
    {<<head::binary, bxor(byte, mask), tail::binary>>, rand}
  end

  defp mutate(:insert, bytes, rand) do
    {at, rand} = position(bytes, rand)
    {inserted, rand} = garbage(1, 8, rand)
    <<head::binary-size(at), tail::binary>> = bytes
    {head <> inserted <> tail, rand}
  end

  defp mutate(:delete, bytes, rand) do
    {at, rand} = position(bytes, rand)
    {count, rand} = :rand.uniform_s(8, rand)
    count = min(count, byte_size(bytes) - at)
    <<head::binary-size(at), _::binary-size(count), tail::binary>> = bytes
    {head <> tail, rand}
  end

  defp mutate(:repeat, bytes, rand) do
    {at, rand} = position(bytes, rand)
    {count, rand} = :rand.uniform_s(16, rand)
    slice = binary_part(bytes, at, min(count, byte_size(bytes) - at))
    <<head::binary-size(at), tail::binary>> = bytes
    {head <> slice <> slice <> tail, rand}
  end

  defp mutate(:cut, bytes, rand) do
    {at, rand} = position(bytes, rand)
    {binary_part(bytes, 0, at), rand}
  end

  defp position(bytes, rand) do
    {at, rand} = :rand.uniform_s(byte_size(bytes), rand)
    {at - 1, rand}
  end

  # Random bytes, without a line end (so that a line stays one line).
  defp garbage(least, most, rand) do
    {size, rand} = :rand.uniform_s(most - least + 1, rand)

    Enum.reduce(1..(least + size - 1), {<<>>, rand}, fn _, {acc, rand} ->
      {byte, rand} = :rand.uniform_s(256, rand)
      byte = byte - 1
      {if(byte in [?\r, ?\n], do: acc <> "_", else: <<acc::binary, byte>>), rand}
    end)
  end

  defp digits(count, rand) do
    Enum.reduce(1..count, {"", rand}, fn _, {acc, rand} ->
      {digit, rand} = :rand.uniform_s(10, rand)
      {acc <> Integer.to_string(rem(digit, 10) + if(acc == "", do: 1, else: 0)), rand}
    end)
  end

  defp word(count, rand) do
    Enum.reduce(1..count, {"", rand}, fn _, {acc, rand} ->
      {letter, rand} = :rand.uniform_s(26, rand)
      {acc <> <<?a + letter - 1>>, rand}
    end)
  end

  defp split(body, rand) do
    if byte_size(body) <= 1 do
      {[body], rand}
    else
      {size, rand} = :rand.uniform_s(byte_size(body), rand)
      <<chunk::binary-size(size), rest::binary>> = body
      {chunks, rand} = split(rest, rand)
      {[chunk | chunks], rand}
    end
  end

  defp pick(list, rand) do
    {index, rand} = :rand.uniform_s(length(list), rand)
    {Enum.at(list, index - 1), rand}
  end

  ## Whole or not

  # Whether the bytes begin with a whole request (or one the server can
  # tell is malformed before its end), which the server must answer, as
  # the same parser the gateway uses reads it. The limits are the
  # gateway's defaults.
  defp http_whole?(bytes) do
    case :erlang.decode_packet(:http_bin, bytes, []) do
      {:ok, {:http_error, blank}, rest} when blank in ["\r\n", "\n"] -> http_whole?(rest)
      {:ok, {:http_request, _, _, _}, rest} -> head_whole?(rest, %{})
      {:ok, _malformed, _rest} -> true
      {:more, _} -> false
      {:error, _} -> true
    end
  end

  defp head_whole?(bytes, headers) do
    case :erlang.decode_packet(:httph_bin, bytes, []) do
      {:ok, :http_eoh, body} ->
        body_whole?(body, headers)

      {:ok, {:http_header, _, name, _, value}, rest}
      when name in [:"Content-Length", :"Transfer-Encoding"] ->
        value = value |> String.trim() |> String.downcase()

        cond do
          name == :"Transfer-Encoding" and value != "chunked" -> true
          name == :"Content-Length" and not (value =~ ~r/\A[0-9]{1,9}\z/) -> true
          name == :"Content-Length" and String.to_integer(value) > 65_536 -> true
          true -> head_whole?(rest, Map.put(headers, name, value))
        end

      {:ok, {:http_header, _, _, _, _}, rest} ->
        head_whole?(rest, headers)

      {:ok, _malformed, _rest} ->
        true

      {:more, _} ->
        false

      {:error, _} ->
        true
    end
  end

  defp body_whole?(body, %{"Transfer-Encoding": "chunked"}), do: chunks_whole?(body)

  defp body_whole?(body, %{"Content-Length": length}),
    do: byte_size(body) >= String.to_integer(length)

  defp body_whole?(_body, _headers), do: true

  defp chunks_whole?(body) do
    case :binary.split(body, "\n") do
      [line, rest] ->
        case Regex.run(~r/\A[ \t]*([0-9A-Fa-f]+)[ \t]*(;[^\r\n]*)?\r?\z/, line) do
          [_ | [hex | _]] ->
            size = String.to_integer(hex, 16)

            cond do
              size > 65_536 -> true
              size == 0 -> trailer_whole?(rest)
              byte_size(rest) < size + 2 -> false
              binary_part(rest, size, 2) != "\r\n" -> true
              true -> chunks_whole?(binary_part(rest, size + 2, byte_size(rest) - size - 2))
            end

          nil ->
            true
        end

      [_unfinished] ->
        false
    end
  end

  defp trailer_whole?(bytes) do
    case :erlang.decode_packet(:httph_bin, bytes, []) do
      {:ok, :http_eoh, _} -> true
      {:ok, {:http_header, _, _, _, _}, rest} -> trailer_whole?(rest)
      {:more, _} -> false
      _malformed -> true
    end
  end

  # Whether the bytes hold a whole frame that the server must answer (any
  # but a pong), or one it can tell is malformed, as cowlib reads frames.
  defp ws_whole?(bytes, fragment) do
    case :cow_ws.parse_header(bytes, %{}, fragment) do
      :more ->
        false

      :error ->
        true

      {_type, _fragment, _rsv, _length, :undefined, _rest} ->
        true

      {_type, _fragment, _rsv, length, _mask, rest} when byte_size(rest) < length ->
        false

      {type, new_fragment, _rsv, length, _mask, rest} ->
        rest = binary_part(rest, length, byte_size(rest) - length)

        case {type, new_fragment} do
          {:pong, _} -> ws_whole?(rest, fragment)
          {_, {:nofin, _, _}} -> ws_whole?(rest, new_fragment)
          _answered -> true
        end
    end
  end

  ## Tokens

  # A token the server signed, when it has accounts; a well-formed one of
  # our own otherwise. Either way its other spellings must be refused.
  defp token(host, port, deadline, seed) do
    body = ~s({"device_id":"fuzz-token-#{seed}"})

    request =
      "POST /api/device_login HTTP/1.1\r\nHost: grove\r\nContent-Type: application/json\r\n" <>
        "Content-Length: #{byte_size(body)}\r\nConnection: close\r\n\r\n#{body}"

    with {:answered, status, response, _} when status in [200, 201] <-
           http(host, port, request, deadline, false),
         [_head, json] <- String.split(response, "\r\n\r\n", parts: 2),
         %{"token" => token} <- :jiffy.decode(json, [:return_maps]) do
      token
    else
      _ ->
        encode = &Base.url_encode64(&1, padding: false)

        "v1." <>
          encode.(:crypto.strong_rand_bytes(32)) <> "." <> encode.(:crypto.strong_rand_bytes(32))
    end
  end

  @alphabet ~c"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

  # The same bytes spelled otherwise: with padding, or with the unused
  # bits of a last character set.
  defp noncanonical(token, rand) do
    ["v1", payload, signature] = String.split(token, ".", parts: 3)
    {how, rand} = pick([:pad_payload, :pad_signature, :bits_payload, :bits_signature], rand)

    spelled =
      case how do
        :pad_payload -> ["v1", payload <> "=", signature]
        :pad_signature -> ["v1", payload, signature <> "="]
        :bits_payload -> ["v1", other_bits(payload), signature]
        :bits_signature -> ["v1", payload, other_bits(signature)]
      end

    {Enum.join(spelled, "."), rand}
  end

  defp other_bits(text) do
    {head, <<last>>} = String.split_at(text, -1)
    index = Enum.find_index(@alphabet, &(&1 == last))
    head <> <<Enum.at(@alphabet, bxor(index, 1))>>
  end

  ## Exchanges

  # What happened: `{:answered, status, bytes, ending}` (ending `:closed`,
  # `:reset` or `:open`), or `:closed`, `:reset`, `:silent`, `{:garbage,
  # bytes}` without an answer; for WebSocket, the first frame that decides.
  defp exchange(%{kind: :http, input: input, end_ours: end_ours}, ctx),
    do: http(ctx.host, ctx.port, input, ctx.deadline, end_ours)

  defp exchange(%{kind: :ws} = probe, ctx) do
    path = "/ws?encoding=#{probe.encoding}"

    case WsClient.connect(ctx.host, ctx.port, path, active: false, timeout: ctx.deadline) do
      {:ok, client} ->
        socket = client.socket
        Enum.each(probe.input, &:gen_tcp.send(socket, &1))
        if probe.end_ours, do: :gen_tcp.shutdown(socket, :write)
        outcome = frames(socket, client.buffer, probe, deadline(ctx.deadline))

        if probe.expect == :answer_then_reset,
          do: :inet.setopts(socket, linger: {true, 0})

        :gen_tcp.close(socket)
        outcome

      {:error, reason} ->
        {:no_handshake, reason}
    end
  end

  defp http(host, port, input, deadline, end_ours) do
    case :gen_tcp.connect(host, port, [:binary, active: false], connect_timeout(deadline)) do
      {:ok, socket} ->
        sent = :gen_tcp.send(socket, input)
        if end_ours, do: :gen_tcp.shutdown(socket, :write)
        outcome = if sent == :ok, do: response(socket, "", deadline(deadline)), else: :reset
        :gen_tcp.close(socket)
        outcome

      {:error, reason} ->
        {:no_connection, reason}
    end
  end

  defp deadline(ms), do: System.monotonic_time(:millisecond) + ms

  # A connection is the kernel's to accept, not an answer to an input: a
  # short deadline does not cut it below a second, where a client's own
  # stall of a few hundred milliseconds read as the server's silence.
  defp connect_timeout(deadline), do: max(deadline, 1_000)

  defp response(socket, acc, deadline) do
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    case :gen_tcp.recv(socket, 0, left) do
      {:ok, data} -> response(socket, acc <> data, deadline)
      {:error, :closed} -> ended(acc, :closed)
      {:error, :timeout} -> ended(acc, :open)
      {:error, _reset} -> ended(acc, :reset)
    end
  end

  defp ended("", :closed), do: :closed
  defp ended("", :open), do: :silent
  defp ended("", :reset), do: :reset

  defp ended(bytes, ending) do
    case bytes do
      <<"HTTP/1.", _, " ", status::binary-size(3), _::binary>> ->
        case Integer.parse(status) do
          {status, ""} -> {:answered, status, bytes, ending}
          _ -> {:garbage, bytes}
        end

      _ ->
        {:garbage, bytes}
    end
  end

  # Frames until one decides: a close frame, a data frame (an `error`
  # message for a refusal), or the socket's end.
  defp frames(socket, buffer, probe, deadline) do
    case :cow_ws.parse_header(buffer, %{}, :undefined) do
      {type, _fragment, _rsv, length, _mask, rest} when byte_size(rest) >= length ->
        <<payload::binary-size(length), rest::binary>> = rest

        case frame(type, payload, probe) do
          :next -> frames(socket, rest, probe, deadline)
          decided -> decided
        end

      :error ->
        {:bad_frame, buffer}

      _more ->
        left = max(deadline - System.monotonic_time(:millisecond), 0)

        case :gen_tcp.recv(socket, 0, left) do
          {:ok, data} -> frames(socket, buffer <> data, probe, deadline)
          {:error, :closed} -> :closed
          {:error, :timeout} -> :silent
          {:error, _reset} -> :reset
        end
    end
  end

  defp frame(:close, <<code::16, _reason::binary>>, _probe), do: {:close, code}
  defp frame(:close, _payload, _probe), do: {:close, nil}

  defp frame(type, payload, %{expect: :refusal, encoding: encoding})
       when type in [:text, :binary] do
    case Protocol.decode(payload, encoding) do
      {:ok, %{type: :error, code: code}} -> {:error_message, code}
      _other -> :next
    end
  end

  # After the join: the action's answer decides (what comes before it,
  # the welcome and the views, does not).
  defp frame(type, payload, %{expect: expect, encoding: encoding})
       when type in [:text, :binary] and expect in [:act_refused, :act_answered] do
    case Protocol.decode(payload, encoding) do
      {:ok, %{type: :acted, result: result}} -> {:acted, result}
      {:ok, %{type: :error, code: code}} -> {:error_message, code}
      {:ok, _other} -> :next
      _ -> {:message, :undecodable}
    end
  end

  defp frame(type, payload, %{encoding: encoding}) when type in [:text, :binary] do
    case Protocol.decode(payload, encoding) do
      {:ok, %{type: type}} -> {:message, type}
      _ -> {:message, :undecodable}
    end
  end

  # A pong answers a ping; the server's own pings answer nothing.
  defp frame(:pong, _payload, %{expect: expect}) when expect != :refusal, do: {:message, :pong}
  defp frame(_control, _payload, _probe), do: :next

  ## Verdicts

  @refusals [501, 505]

  defp judge(:refusal, {:answered, status, _, :closed})
       when status in 400..499 or status in @refusals,
       do: :ok

  defp judge(expect, {:answered, status, _, :closed})
       when expect in [:answer, :unfinished] and (status < 500 or status in @refusals),
       do: :ok

  defp judge(:unfinished, :closed), do: :ok

  defp judge(:refusal, {:error_message, _code}), do: :ok
  defp judge(:act_refused, {:acted, result}) when result != :ok, do: :ok
  defp judge(:act_answered, {:acted, _result}), do: :ok

  defp judge(expect, {:error_message, _code}) when expect in [:act_refused, :act_answered],
    do: :ok

  defp judge(_expect, {:close, code}) when is_integer(code), do: :ok

  defp judge(expect, {:message, _type})
       when expect in [:answer, :answer_then_reset, :unfinished],
       do: :ok

  defp judge(_expect, outcome), do: {:violation, describe(outcome)}

  defp health(ctx) do
    request = "GET /healthz HTTP/1.1\r\nHost: grove\r\nConnection: close\r\n\r\n"

    case http(ctx.host, ctx.port, request, ctx.deadline, false) do
      {:answered, 200, _, _} -> :ok
      other -> {:violation, "/healthz afterwards: " <> describe(other)}
    end
  end

  defp describe({:answered, status, _bytes, :closed}), do: Integer.to_string(status)
  defp describe({:answered, status, _bytes, :open}), do: "#{status}, then not closed"
  defp describe({:answered, status, _bytes, :reset}), do: "#{status}, then reset"
  defp describe({:garbage, bytes}), do: "not HTTP: " <> shown(bytes)
  defp describe({:close, nil}), do: "close without a code"
  defp describe({:close, code}), do: "close #{code}"
  defp describe({:error_message, code}), do: "error #{code}"
  defp describe({:acted, result}), do: "acted #{result}"
  defp describe({:message, type}), do: "message #{type}"
  defp describe({:bad_frame, bytes}), do: "not a frame: " <> shown(bytes)
  defp describe({:no_handshake, reason}), do: "no WebSocket handshake: #{inspect(reason)}"
  defp describe({:no_connection, reason}), do: "no connection: #{inspect(reason)}"
  defp describe(:closed), do: "closed"
  defp describe(:reset), do: "reset"
  defp describe(:silent), do: "silent"
end
