from rag.datagen.main import main

if __name__ == "__main__":
    from rag.core.entry import guard_command_line

    guard_command_line("datagen")
    main()
