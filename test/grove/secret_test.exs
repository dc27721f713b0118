defmodule Grove.SecretTest do
  # Starts a gateway: Yaws allows one per node, so not async.
  use ExUnit.Case, async: false

  doctest Grove.Secret

  alias Grove.Secret

  @signing_key "signing-key-0123456789-0123456789-abc"
  @admin_token "admin-token-5f1e2d"

  test "compares in constant time, and only with binaries" do
    secret = Secret.new("correct horse")
    assert Secret.equal?(secret, "correct horse")
    refute Secret.equal?(secret, "correct horsf")
    refute Secret.equal?(secret, "correct")
    refute Secret.equal?(secret, nil)
    assert Secret.new(nil) == nil
    assert Secret.new(secret) == secret
  end

  # The running configuration, secrets included, lives in shared terms;
  # a VM that crashes must still write its crash dump (the VM's dump
  # writer faulted on a secret kept there as a closure).
  test "a node that keeps a secret in a shared term and crashes writes its crash dump whole" do
    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-dump-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    dump = Path.join(dir, "erl_crash.dump")
    paths = Enum.flat_map(:code.get_path(), &["-pa", to_string(&1)])

    crash =
      ~S|persistent_term:put(grove_test, 'Elixir.Grove.Secret':new(<<"a-signing-key">>)), | <>
        ~S|erlang:halt("a crash")|

    try do
      {_output, status} =
        System.cmd("erl", ["-noshell" | paths] ++ ["-eval", crash],
          env: [{"ERL_CRASH_DUMP", dump}],
          stderr_to_stdout: true
        )

      assert status == 1
      assert File.read!(dump) =~ ~r/\n=end\n?\z/
    after
      File.rm_rf!(dir)
    end
  end

  # What a crash report or an operator's :sys.get_state would print: every
  # child spec of the instance's tree, the state of every OTP process in
  # it, and the shared terms. None may hold a secret in the clear.
  test "no process state, child spec or shared term of an instance holds a secret" do
    %{sup: sup} =
      Grove.TestInstance.start!("secret",
        sqlite: true,
        world: [width: 40, height: 40, zone_size: 20, tick: :manual],
        actors: [count: 0],
        accounts: [secret: @signing_key],
        gateway: [port: 0, admin_token: @admin_token]
      )

    printed = [inspect(:persistent_term.get(), limit: :infinity) | tree(sup)]

    for text <- printed do
      refute text =~ @signing_key
      refute text =~ @admin_token
    end
  end

  test "a connection's status leaves out the bytes its client sent" do
    %{port: port} =
      Grove.TestInstance.start!("secret",
        world: [width: 40, height: 40, zone_size: 20, tick: :manual],
        actors: [count: 0]
      )

    player_token = "v1.player-token-7c3a9b"
    {:ok, client} = Grove.WsClient.connect("127.0.0.1", port, "/ws")
    join = ~s({"type":"join","protocol":3,"view_radius":8,"name":"","token":"#{player_token}"})
    frame = IO.iodata_to_binary(:cow_ws.masked_frame({:text, join}, %{}))
    # All but the frame's last bytes: the parser holds the rest, token
    # included (masked, which anyone reading a log could undo).
    :ok = :gen_tcp.send(client.socket, binary_part(frame, 0, byte_size(frame) - 2))

    Grove.WorldCase.eventually(fn ->
      assert [connection] = Grove.Gateway.sessions()
      status = inspect(:sys.get_status(connection), limit: :infinity)
      assert status =~ "bytes from the client"
      refute status =~ player_token
    end)
  end

  defp tree(sup) do
    for {id, pid, type, _} <- Supervisor.which_children(sup), is_pid(pid) do
      {:ok, spec} = :supervisor.get_childspec(sup, id)
      own = [inspect(spec, limit: :infinity) | state(pid)]
      if type == :supervisor, do: own ++ tree(pid), else: own
    end
    |> List.flatten()
  end

  defp state(pid) do
    [inspect(:sys.get_state(pid, 1000), limit: :infinity)]
  catch
    # Not an OTP process (Yaws has a few), or busy: nothing to print.
    :exit, _ -> []
  end
end
